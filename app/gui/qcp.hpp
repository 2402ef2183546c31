// SPDX-License-Identifier: GPL-3.0-or-later
// The one include of QCustomPlot: its header uses foreach, which QT_NO_FOREACH would forbid.
#pragma once
#ifdef QT_NO_FOREACH
#undef QT_NO_FOREACH
#include <qcustomplot.h>
#define QT_NO_FOREACH
#else
#include <qcustomplot.h>
#endif
