/*
 * fake_pyxis.c - a stand-in for NVIDIA's pyxis SPANK plugin on the local test cluster.
 *
 * Why: the project renders sbatch/srun lines with pyxis options (--container-image, ...).
 * Real pyxis + enroot are not packaged for Debian, and no image registry is reachable here;
 * without the plugin, Slurm rejects those options as unknown. This plugin registers the same
 * options so that rendered scripts run unchanged. It starts no container: the task runs on the
 * host, and what was requested is put in its environment for tests to check:
 *
 *   PYXIS_CONTAINER_{IMAGE,MOUNTS,WORKDIR,NAME,SAVE,ENV}   the option's argument
 *   PYXIS_CONTAINER_MOUNT_HOME   1 for --container-mount-home,   0 for --no-container-mount-home
 *   PYXIS_CONTAINER_REMAP_ROOT   1 for --container-remap-root,   0 for --no-container-remap-root
 *   PYXIS_CONTAINER_ENTRYPOINT   1 for --container-entrypoint,   0 for --no-container-entrypoint
 *   PYXIS_CONTAINER_WRITABLE     1 for --container-writable,     0 for --container-readonly
 *
 * Only options that were given are exported; of a pair, the last one given wins (as in pyxis).
 * --container-workdir also becomes the task's working directory, and the task fails if that
 * directory does not exist (a real container would fail too, and this catches wrong paths).
 *
 * Build (needs slurm/spank.h from libslurm-dev; scripts/local-slurm up does this):
 *   gcc -shared -fPIC -o fake_pyxis.so fake_pyxis.c
 * Enable: a line "required /path/fake_pyxis.so" in plugstack.conf beside slurm.conf.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <slurm/spank.h>

/* The name must be "pyxis": Slurm forwards options as "pyxis:container-image" etc., and
 * sbatch-level options reach srun steps in variables named after the plugin. */
SPANK_PLUGIN(pyxis, 1);

struct fake_option {
    const char *name;  /* as typed after "--" */
    int has_arg;
    const char *var;   /* environment variable it sets in the task */
    const char *flag;  /* value for an option without argument */
};

static const struct fake_option options[] = {
    {"container-image", 1, "PYXIS_CONTAINER_IMAGE", NULL},
    {"container-mounts", 1, "PYXIS_CONTAINER_MOUNTS", NULL},
    {"container-workdir", 1, "PYXIS_CONTAINER_WORKDIR", NULL},
    {"container-name", 1, "PYXIS_CONTAINER_NAME", NULL},
    {"container-save", 1, "PYXIS_CONTAINER_SAVE", NULL},
    {"container-env", 1, "PYXIS_CONTAINER_ENV", NULL},
    {"container-mount-home", 0, "PYXIS_CONTAINER_MOUNT_HOME", "1"},
    {"no-container-mount-home", 0, "PYXIS_CONTAINER_MOUNT_HOME", "0"},
    {"container-remap-root", 0, "PYXIS_CONTAINER_REMAP_ROOT", "1"},
    {"no-container-remap-root", 0, "PYXIS_CONTAINER_REMAP_ROOT", "0"},
    {"container-entrypoint", 0, "PYXIS_CONTAINER_ENTRYPOINT", "1"},
    {"no-container-entrypoint", 0, "PYXIS_CONTAINER_ENTRYPOINT", "0"},
    {"container-writable", 0, "PYXIS_CONTAINER_WRITABLE", "1"},
    {"container-readonly", 0, "PYXIS_CONTAINER_WRITABLE", "0"},
};
#define NOPTIONS ((int)(sizeof(options) / sizeof(options[0])))

/* What each variable will be set to, indexed like options[]; NULL = not requested. */
static char *values[NOPTIONS];

static int workdir_index(void)
{
    for (int i = 0; i < NOPTIONS; i++)
        if (strcmp(options[i].name, "container-workdir") == 0)
            return i;
    return -1;
}

/* Called by Slurm for each option given, in srun/sbatch and again in slurmstepd. */
static int option_cb(int val, const char *optarg, int remote)
{
    (void)remote;
    if (val < 0 || val >= NOPTIONS)
        return -1;
    const char *value = options[val].has_arg ? optarg : options[val].flag;
    if (value == NULL || *value == '\0') {
        slurm_error("pyxis (fake): --%s needs a value", options[val].name);
        return -1;
    }
    /* Both halves of a pair set one variable: forget the other half so the last one wins. */
    for (int i = 0; i < NOPTIONS; i++) {
        if (strcmp(options[i].var, options[val].var) == 0) {
            free(values[i]);
            values[i] = NULL;
        }
    }
    values[val] = strdup(value);
    return values[val] ? 0 : -1;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    for (int i = 0; i < NOPTIONS; i++) {
        struct spank_option opt = {
            .name = (char *)options[i].name,
            .arginfo = options[i].has_arg ? "ARG" : NULL,
            .usage = "[fake pyxis: recorded in PYXIS_* variables, no container is started]",
            .has_arg = options[i].has_arg,
            .val = i,
            .cb = (spank_opt_cb_f)option_cb,
        };
        if (spank_option_register(sp, &opt) != ESPANK_SUCCESS) {
            slurm_error("pyxis (fake): cannot register --%s", options[i].name);
            return -1;
        }
    }
    return 0;
}

/* Runs in each task (in slurmstepd, after fork, before exec of the user's command). */
int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    for (int i = 0; i < NOPTIONS; i++) {
        if (values[i] && spank_setenv(sp, options[i].var, values[i], 1) != ESPANK_SUCCESS) {
            slurm_error("pyxis (fake): cannot set %s", options[i].var);
            return -1;
        }
    }
    int w = workdir_index();
    if (w >= 0 && values[w] && chdir(values[w]) != 0) {
        slurm_error("pyxis (fake): --container-workdir=%s: %s", values[w], strerror(errno));
        return -1;
    }
    return 0;
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
    (void)sp;
    (void)ac;
    (void)av;
    for (int i = 0; i < NOPTIONS; i++) {
        free(values[i]);
        values[i] = NULL;
    }
    return 0;
}
