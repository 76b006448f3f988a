/* SPDX-License-Identifier: Apache-2.0 */
#ifndef SBX_VERSION_H
#define SBX_VERSION_H
#define SANDBOXD_VERSION "0.2.0"
#endif
