/* SPDX-License-Identifier: Apache-2.0 */
/* The Python (and a session's JavaScript) built into the binary (mcp_runner.c): one copy,
 * assembled in from src/inside/. */
#ifndef SBX_MCP_RUNNER_H
#define SBX_MCP_RUNNER_H

/* The Python that runs the submitted code inside the sandbox: src/inside/runner.py, built in
 * (mcp_runner.c). */
extern const char mcp_runner_source[];
/* The fork template (src/inside/template.py), the same way. */
extern const char mcp_template_source[];
/* A session's interpreter: "_SANDBOXD_SESSION = True", runner.py, then src/inside/session.py. */
extern const char mcp_session_source[];
/* A javascript session's interpreter: src/inside/session.js, for `node -e`. */
extern const char mcp_session_js_source[];

#endif
