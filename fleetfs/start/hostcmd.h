/* SPDX-License-Identifier: Apache-2.0 */
/* fleetfs/start/hostcmd.h — `fleetfs declare NAME [-o opt,...]`: the operator's
 * side of adding a host (scripts/broker host add runs it).  See
 * broker/declare.h for what it makes and why an operator must. */
#ifndef FLEETFS_HOSTCMD_H
#define FLEETFS_HOSTCMD_H

/* argv[1] is "declare".  Exit status: 0 done, 1 the broker refused or is
 * unreachable, 2 usage. */
int hc_declare_main(int argc, char **argv);

/* argv[1] is "dlq": `fleetfs dlq list | show ID | redrive ID | purge [-o
 * opt,...]` (broker/dlq.h).  Exit status: 0 done, 1 the broker refused or
 * is unreachable, 2 usage, 3 no such dead letter, 4 not redriven (the
 * broker did not take the copy; the letter stays). */
int hc_dlq_main(int argc, char **argv);

#endif
