"""The encode room: what `pip install edge-xsent` needs to embed text. A model folder's files and their
checks (bundle, layout in the package's base), the tokenizer, onnxruntime sessions (runtime), the
`Encoder` API (encoder), compact vectors, the Hugging Face face of a folder (hf), and the model in torch
(model, int8_weights) for the torch backend. Imports only the package's base and data rooms."""
