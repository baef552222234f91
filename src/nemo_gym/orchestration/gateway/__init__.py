"""The Ray gateway that fronts several vLLM replicas (``use_ray_serve``).

A program shipped into the job (``shipping.Program.GATEWAY``) and run with the container's
``python3``, which needs only ``ray`` and ``aiohttp``: ``ray_serve_gateway`` (its entry and CLI),
``supervision`` (the replicas), ``proxy`` (the HTTP endpoint) and ``replica`` (one replica's process,
run inside Ray's workers). Nothing on the submit side imports them.
"""
