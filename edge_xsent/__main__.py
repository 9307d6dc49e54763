"""`python -m edge_xsent ...` is `edge-xsent ...`: for a machine where the package runs from a checkout
without being installed (a lent GPU: PYTHONPATH=. python3 -m edge_xsent train ...)."""

from edge_xsent.cli import main

main()
