"""The web demo of a trained run (Gradio)."""
