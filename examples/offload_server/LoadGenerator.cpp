#include "LoadGenerator.h"
