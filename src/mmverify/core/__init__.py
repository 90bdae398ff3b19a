"""Types, registry, safe media I/O, hashing and settings shared by every layer."""
