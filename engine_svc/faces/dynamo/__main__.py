"""`python -m engine_svc.faces.dynamo --engine HOST:PORT ...`: run the Dynamo worker in front of a running engine."""

from dynamo.common.backend.run import run

from engine_svc.faces.dynamo.worker import ScaleoutEngine

if __name__ == "__main__":
    run(ScaleoutEngine)
