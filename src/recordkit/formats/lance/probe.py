"""Is this directory a Lance data set? (the registry's directory probe; light: no codec imports)"""


def probe(names) -> bool:
    return "_versions" in names
