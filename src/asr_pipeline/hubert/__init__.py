"""The HuBERT recipe's steps that are not model training: k-means units of frame features (``units``)."""
