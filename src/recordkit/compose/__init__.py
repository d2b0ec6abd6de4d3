"""Formats composed: what takes one format to another or holds two side by side.

``convert`` (any format the registry reads into any it writes), ``verify`` (two data sets compared
sequence by sequence, manifests) and ``plan`` (``recordkit plan``: a read's window, memory and
timeline). They sit above ``formats/`` and ``engine/`` and use both; neither imports them back.
"""
