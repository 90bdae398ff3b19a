"""Image verifiers: solid fills and borders, SSIM, preservation outside an edited box."""
