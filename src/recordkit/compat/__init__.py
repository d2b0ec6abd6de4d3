"""Readers of other frameworks' configuration files (CNTK BrainScript reader sections, ...)."""
