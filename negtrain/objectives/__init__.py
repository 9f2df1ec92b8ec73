"""Training objectives of the masked-LM family: losses and the collators that feed them."""
