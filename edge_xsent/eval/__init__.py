"""The eval room: retrieval and classification metrics (evaluate), the eval commands' runs beside peer
encoders (report, peers), bitext mining (mine) and the rules that ship a model (decisions). Imports the
base, data and encode rooms."""
