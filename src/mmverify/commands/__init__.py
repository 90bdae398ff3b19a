"""Command functions of the ``mmverify`` command line, registered on the app in ``mmverify.cli``."""
