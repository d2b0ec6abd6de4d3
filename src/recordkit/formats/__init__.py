"""One codec per on-disk format. Nothing outside this package knows a byte layout."""
