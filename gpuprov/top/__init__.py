"""`gpuprov top`: a live view of every GPU and MIG instance across the fleet, over SSH.

One file per concept: `node_script` (the fixed sampling program each node runs and how its
lines become the snapshot model's samples), `connections` (inventory hosts -> paramiko
sessions, host keys checked), `view` (rendering the latest samples).
"""
