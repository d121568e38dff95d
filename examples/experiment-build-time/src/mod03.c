int f03(void) { return 3; }
