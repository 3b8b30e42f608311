"""Publishing a trained run: the exported model folder and its model card."""
