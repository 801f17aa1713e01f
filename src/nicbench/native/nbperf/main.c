// SPDX-License-Identifier: GPL-2.0
/* nbperf: nicbench's multi-threaded TCP/UDP traffic engine.
 *
 *   nbperf server (--until T | --lifetime S) [--port P] ...
 *   nbperf client --server HOST --start T --duration S [--conns N] ...
 *   nbperf version
 *
 * Output: JSON lines on stdout (see README.md).  Errors: one line on stderr,
 * "nbperf: error: ...", and exit 1 (run time), 2 (usage, bad input) or 3
 * (stopped by a signal before the end of a test).
 */
#include "nbperf.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	if (argc < 2)
		die(EX_USAGE, "usage: nbperf server|client|version ... (nbperf client --help)");
	if (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version")) {
		printf("nbperf %s (protocol %d)\n", NBPERF_VERSION, PROTO_VERSION);
		return EX_OK;
	}
	if (!strcmp(argv[1], "client"))
		return cmd_client(argc - 1, argv + 1);
	if (!strcmp(argv[1], "server"))
		return cmd_server(argc - 1, argv + 1);
	if (!strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		printf("usage: nbperf server|client|version ...; nbperf server --help; nbperf client --help\n");
		return EX_OK;
	}
	die(EX_USAGE, "unknown command %s: server, client or version", argv[1]);
}
