"""Networks (nn.Modules only): ResNet trunks with conv taps, PCB (+RPP), BoT (BNNeck)."""
