-- 0004: reserved. Number 0004 belongs to another schema change made at the same time
-- as 0006; this file only keeps the numbers contiguous (Migrations refuses a gap) until
-- that change lands, and is deleted then. It changes nothing.

DO 0;
