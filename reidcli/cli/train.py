"""`reid train METHOD` — network training and metric learning (later releases)."""
from reidcli.cli._stub import stub_group

app = stub_group("train", ("pcb", "bot", "dgvae", "dmgnet", "xqda", "warca", "kissme", "lfda",
                           "klfda", "rpcca", "pca"))
