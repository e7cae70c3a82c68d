# Threads (README "## Threads"). Native: the pool in src/pool.c uses POSIX threads; -pthread
# makes that link on every libc (glibc >= 2.34 would not need it). tests/c/test_threads.c runs
# in test-c like every C test.
CFLAGS += -pthread
