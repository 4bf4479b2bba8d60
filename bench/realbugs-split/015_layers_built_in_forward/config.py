"""Problem sizes shared by the model and the training script."""

N, D_in, H, D_out = 16, 20, 8, 4
