/* Child processes (ffmpeg, ffprobe) started with posix_spawn. */
#define _GNU_SOURCE
#include "pushmedia_shim.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>

int pm_spawn(const char *path, char *const argv[], int stdout_fd, int stderr_fd, int *pid_out) {
    /* posix_spawn (vfork + exec in glibc): nothing runs in the child but the file actions, and
     * the sanitizers and the Swift runtime see no fork of a multithreaded process. */
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attributes;
    if (posix_spawn_file_actions_init(&actions)) return errno;
    if (posix_spawnattr_init(&attributes)) {
        posix_spawn_file_actions_destroy(&actions);
        return errno;
    }
    int result = posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    if (!result) result = stdout_fd >= 0 ? posix_spawn_file_actions_adddup2(&actions, stdout_fd, 1)
                                         : posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    if (!result) result = stderr_fd >= 0 ? posix_spawn_file_actions_adddup2(&actions, stderr_fd, 2)
                                         : posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    if (!result) result = posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    if (!result) result = posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
    if (!result) result = posix_spawnattr_setpgroup(&attributes, 0);
    pid_t pid = 0;
    if (!result) result = posix_spawn(&pid, path, &actions, &attributes, argv, __environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
    if (!result) *pid_out = pid;
    return result;
}
