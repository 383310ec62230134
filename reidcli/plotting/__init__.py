"""Figures (matplotlib, Agg backend): CMC curves, t-SNE, C-DPCF weight maps, rank lists,
training curves and distance histograms. Each ``plot_*`` function returns the plotted data
(a small dataclass) and the drawn matplotlib Figure (its ``figure`` field), so tests and
notebooks can check what was drawn."""
