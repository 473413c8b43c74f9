"""The platform this process runs on, read once: every module of the package that
decides by platform asks here (``pathguard`` reads its own, having no import of the
package). Which box a platform gets is :func:`sandbox.dispatch.box_name`'s."""

from __future__ import annotations

import sys

PLATFORM: str = sys.platform
LINUX: bool = PLATFORM.startswith("linux")
MACOS: bool = PLATFORM == "darwin"
