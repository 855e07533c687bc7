"""The REST surface: ``create_app()`` builds the FastAPI application (``memstrata serve`` runs it)."""

from memstrata.server.app import create_app

__all__ = ["create_app"]
