"""The export room: a model folder made a bundle (exporter: ONNX fp32, int8, int4, TorchScript, parity
checked), per-row int8 activations (rowquant) and the model card (card). Imports the base, data, encode
and eval rooms (the parity report scores retrieval)."""
