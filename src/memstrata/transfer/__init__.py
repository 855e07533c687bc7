"""Moving data in and out: memstrata's native export format (see :mod:`memstrata.transfer.native`)."""
