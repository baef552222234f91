"""The Ray Serve gateway that fronts several vLLM replicas (``use_ray_serve``).

A program shipped into the job (``shipping.Program.GATEWAY``) and run with the container's
``python3``, which needs ``ray[serve]`` and ``aiohttp``: ``ray_serve_gateway`` (its entry, CLI and
the Serve application it runs and watches), ``proxy`` (the Serve deployment: a replica that owns
one engine, its health check and the streamed relay), ``replica`` (the engine's process) and
``supervision`` (the pure rules: ready, degraded, recovered, the bound and the exit statuses).
``proxy`` and ``replica`` run inside Serve's replicas and travel there by value. Nothing on the
submit side imports them.
"""
