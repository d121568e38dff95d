int f11(void) { return 11; }
