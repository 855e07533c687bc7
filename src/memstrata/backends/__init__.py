"""Storage backends, chosen by URL through :func:`memstrata.backends.registry.open_engine`."""
