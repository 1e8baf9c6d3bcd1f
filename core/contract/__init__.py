"""What the engine asks of its plug-ins: the Store protocol with its declared traits, what
every store shares, the twin machinery of async stores, and the Refresher protocol.
"""
