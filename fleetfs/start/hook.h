/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/start/hook.h — `fleetfs hook`: an agent's prompt-submit hook
 * (Claude Code's UserPromptSubmit) that tells the local mount which typed
 * message the agent submitted (fleetfs/inject/witness.h). */
#ifndef FLEETFS_START_HOOK_H
#define FLEETFS_START_HOOK_H

/* Always 0: a hook must never hold up or block the person's prompt. */
int hook_main(int argc, char **argv);

#endif
