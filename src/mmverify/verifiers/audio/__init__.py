"""Audio verifiers: segment cropping, silence splitting, intensity trends, tempo from beats."""

PUBLISHED_SAMPLE_RATE = 22050  # every published audio check loads clips at this rate
