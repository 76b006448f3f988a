/* SPDX-License-Identifier: Apache-2.0 */
/* The run_python runner (src/inside/runner.py) and the sessions' loops, linked into the binary at build time
 * so there is one copy: the assembler includes the file's bytes and a NUL, making it a C string for `python3
 * -c`. The path is relative to the repository root, where make runs the compiler; the Makefile makes this
 * object depend on runner.py. */
#include "mcp/mcp_runner.h"

__asm__(".section .rodata\n"
        ".global mcp_runner_source\n"
        ".type mcp_runner_source, @object\n"
        "mcp_runner_source:\n"
        ".incbin \"src/inside/runner.py\"\n"
        ".byte 0\n"
        ".size mcp_runner_source, . - mcp_runner_source\n"
        ".global mcp_template_source\n"
        ".type mcp_template_source, @object\n"
        "mcp_template_source:\n"
        ".incbin \"src/inside/template.py\"\n"
        ".byte 0\n"
        ".size mcp_template_source, . - mcp_template_source\n"
        /* A session's interpreter: the runner, then the loop that calls it per call. */
        ".global mcp_session_source\n"
        ".type mcp_session_source, @object\n"
        "mcp_session_source:\n"
        ".ascii \"_SANDBOXD_SESSION = True\\n\"\n"
        ".incbin \"src/inside/runner.py\"\n"
        ".incbin \"src/inside/session.py\"\n"
        ".byte 0\n"
        ".size mcp_session_source, . - mcp_session_source\n"
        /* A javascript session's interpreter (node -e). */
        ".global mcp_session_js_source\n"
        ".type mcp_session_js_source, @object\n"
        "mcp_session_js_source:\n"
        ".incbin \"src/inside/session.js\"\n"
        ".byte 0\n"
        ".size mcp_session_js_source, . - mcp_session_js_source\n"
        ".previous\n");
