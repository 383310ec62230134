"""Image descriptors: hand-crafted colour histograms and model feature extraction."""
