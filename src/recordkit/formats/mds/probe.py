"""Is this directory an MDS data set? (the registry's directory probe; light: no codec imports)"""


def probe(names) -> bool:
    return "index.json" in names
