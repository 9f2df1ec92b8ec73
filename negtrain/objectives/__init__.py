"""Training objectives of the masked-LM family, one module each, listed in ``table.py``."""
