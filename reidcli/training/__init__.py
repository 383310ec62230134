"""Training of image models: the shared engine, losses, schedules and method recipes."""

#: the network trainers this package registers: name → "module:attr"
#: (:class:`reidcli.registry.Registry`; tests/test_registry.py checks this table)
METHODS = {
    "bot": "reidcli.training.bot_trainer:BoTTrainer",
    "dgvae": "reidcli.training.dgvae_trainer:DGVAETrainer",
    "dmgnet": "reidcli.training.dmgnet_trainer:DMGNetTrainer",
    "pcb": "reidcli.training.pcb_trainer:PCBTrainer",
}

#: the model architectures this package declares: kind → "module:attr"
#: (:data:`reidcli.models.checkpoint.ARCHITECTURES`)
ARCHITECTURES = {
    "bot": "reidcli.training.bot_trainer:BoTTrainer",
    "dgvae": "reidcli.training.dgvae_trainer:DGVAETrainer",
    "pcb": "reidcli.training.pcb_trainer:PCBTrainer",
}
