int f05(void) { return 5; }
