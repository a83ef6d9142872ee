#pragma once

/// The umbrella header: every public header of coexec.

#include "coexec/CancellationToken.h"
#include "coexec/Clock.h"
#include "coexec/CurrentToken.h"
#include "coexec/Errors.h"
#include "coexec/Future.h"
#include "coexec/PendingTask.h"
#include "coexec/PeriodicHandle.h"
#include "coexec/PoolStats.h"
#include "coexec/RejectionPolicy.h"
#include "coexec/ResumeOn.h"
#include "coexec/ScheduledFuture.h"
#include "coexec/Sleep.h"
#include "coexec/SyncWait.h"
#include "coexec/Task.h"
#include "coexec/ThreadPoolExecutor.h"
#include "coexec/ThreadPoolOptions.h"
#include "coexec/WithTimeout.h"
#include "coexec/WorkQueue.h"
