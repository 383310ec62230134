"""Metric learning on stored features: XQDA (and later WARCA, KISSME, LFDA, ...)."""
