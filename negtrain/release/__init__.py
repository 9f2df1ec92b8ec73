"""A trained model out of its run directory: export with its model card, and pushing to the Hub."""
