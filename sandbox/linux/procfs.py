"""The box's covers over its fresh ``/proc``: the keyring's lists and the entries that
change the host's kernel (used by :mod:`.bwrap_args` and the warm box's starter)."""

# The box shares the harness's session keyring: the system-call filter keeps the keys'
# payloads out of reach, and these lists of every key the box could see (descriptions
# such as a token's name, sizes) are covered like hidden files, unreadable.
KEYRING_LISTS = ("/proc/keys", "/proc/key-users")


# The procfs entries that change the host's kernel, not the box's: bound read-only over
# the box's fresh /proc. bwrap covers these itself only when it finds them writable,
# and /proc/sys is mode 0555, so a box started by root (uid 0 without capabilities still
# passes the permission check on 0644 files) could otherwise set kernel.core_pattern --
# a program the kernel runs as root on the next crash -- or any vm.* and fs.* knob.
# The source is the host's entry: sysctls under /proc/sys/net still answer for the
# opener's network namespace. Entries a kernel lacks are skipped (``--ro-bind-try``).
PROC_READ_ONLY = (
    "/proc/sys",             # sysctls: core_pattern, randomize_va_space, protected_*
    "/proc/sysrq-trigger",   # SysRq: reboot, crash, kill all
    "/proc/irq",             # interrupt affinity
    "/proc/bus",             # PCI configuration space
    "/proc/mtrr",            # memory type ranges
    "/proc/fs",              # file-system tunables (nfsd, xfs)
    "/proc/acpi",            # ACPI events and wake-up sources
    "/proc/scsi",            # SCSI host add/remove
    "/proc/driver",          # driver tunables (rtc)
    "/proc/pressure",        # PSI triggers
    "/proc/kcore",           # the kernel's memory image
    "/proc/timer_list",
)
