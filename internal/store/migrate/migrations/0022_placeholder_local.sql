-- placeholder for local tests only (not committed)
DO 0;
